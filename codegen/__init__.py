"""The PyTorch emitter (the only package that imports torch: train and measure do; emission never does).

``emit`` writes one self-contained module: ``printer`` walks the IR as sympy's printers walk expressions (one
``_print_<Kind>`` method per kind of component) and fills an ``emitter`` from source templates, one module per
component kind: ``parts`` (norms, embeddings), ``attention`` and ``latent`` (attention), ``rotary`` with
``rope_scaling`` (rotary positions), ``mlp`` (dense, gated, mixture of experts), ``blocks`` and ``model`` (blocks,
towers, the model), ``cache`` (generation), ``parallel`` (tensor parallelism) and ``hf`` with ``hf_maps`` and
``hf_export`` (transformers' weight names per model type, both ways). The symbolic commands never import this package.
"""
