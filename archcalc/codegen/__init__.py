"""The PyTorch emitter (the only package that imports torch: train and measure do; emission never does).

``emit`` writes one self-contained module: ``printer`` walks the IR as sympy's printers walk expressions (one
``_print_<Kind>`` method per kind of component) and fills an ``emitter`` from source templates, one module per
component kind: ``parts`` (norms, embeddings), ``attention`` and ``latent`` (attention), ``rotary`` with
``rope_scaling`` (rotary positions), ``mlp`` (dense, gated, mixture of experts), ``blocks`` and ``model`` (blocks,
towers, the model), ``cache`` (generation), ``parallel`` (tensor parallelism) and ``hf`` with
``hf_export`` (transformers' weight names, the layouts of ``archcalc.hf.weights``, both ways). The symbolic commands never import this package.

The generated code itself lives in ``templates/``: real Python modules that ruff checks and formats, read as text by
``template`` (optional regions kept or dropped, placeholders replaced as whole tokens); the modules above decide
which regions a model needs and what the placeholders are. ``literal`` lays data (weight maps, plans) out as ruff
format does and ``flops_source`` writes the exact FLOPs of a training step.
"""
