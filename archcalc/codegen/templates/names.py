"""Stand-ins, for the linter, of the names a generated file defines around a template's code (its
``Config`` and helpers), and of the placeholders that the emitter replaces (upper case: never
left in a generated file)."""

import torch

Config = type("Config", (), {})  # the generated file's config dataclass
KVCache = type("KVCache", (), {})  # archcalc.codegen.cache's KV cache of one attention layer
Indexer = torch.nn.Module  # DeepSeek Sparse Attention's indexer class (templates/indexer.py)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The generated file's rotary rotation (archcalc.codegen.rotary)."""
    return x


# placeholders: a bias flag, a module expression (a norm's constructor call), a class name
Q_BIAS = K_BIAS = V_BIAS = QKV_BIAS = OUT_BIAS = True
OUT_WIDTH = 768  # the source of an attention's output width where it is not its input's (Zamba2's)
Q_NORM = K_NORM = torch.nn.Identity()
ATTENTIONS = (torch.nn.Module,)  # the file's attention classes
STACKS = ("blocks",)  # the model's stacks of blocks, by attribute path
TP_PLAN: dict[str, str] = {}
SP_PLAN: dict[str, str] = {}
TP_UNSUPPORTED = SP_UNSUPPORTED = ""
PP_UNSUPPORTED = ""  # why the model has no pipeline stages ("": it has)
Transformer = torch.nn.Module  # the generated model class


def train_step_flops(seq_len: int) -> int:
    """The generated file's exact matmul FLOPs of a training step on one sequence."""
    return seq_len


HF_WEIGHTS: dict[str, object] = {}  # the weight map of archcalc.codegen.hf
HF_BUFFERS: dict[str, str] = {}
HF_COPIES: dict[str, str] = {}
HF_SPLITS: dict[str, tuple[int, ...]] = {}
OFFSETS: dict[str, int] = {}  # where each stack's layers start in transformers' one list


def check_vocab(input_ids: torch.Tensor, vocab: int) -> None:
    """The generated file's check of the token ids' range (archcalc.codegen.model)."""


RelativeBias = torch.nn.Embedding  # T5's relative position bias (archcalc.codegen.blocks)
RESIDUAL_OUT = ("attn.out.weight", "down.weight")  # names of the projections scaled down by depth
EXTRA_STD = ("sinks",)  # names of the parameters drawn with init_std besides matrices
LAYERS = 12  # the source of the number of blocks
# the file's classes
Embeddings = Block = Rotary = LocalRotary = Alibi = Encoder = Decoder = torch.nn.Module
FINAL_NORM = HEAD_BIAS = BLOCKS = (
    None  # a norm's constructor call; a bias flag; the blocks in order
)
ORDER = ("blocks",)  # the stacks' layers interleaved: layer i comes from ORDER[i % len(ORDER)]
HEAD_WIDTH = 768  # the source of the head's input width


def checkpoint(*args: object, use_reentrant: bool = False) -> torch.Tensor:
    """torch.utils.checkpoint.checkpoint, as the generated file imports it."""
    return torch.zeros(())


BlockCache = KVCache  # a block's cache: a KVCache, or (self-attention's, cross-attention's)
BlockOutput = torch.Tensor  # a block's output: x, or (x, the routed experts' output): a shortcut
EMBEDDED = TOKEN_WIDTH = POSITION_ROWS = TOKEN_TYPES = NORM = None  # expressions
MSCALE = 1.0  # YaRN's mscale (a config field)
IN_BIAS = CONV_BIAS = True  # a Mamba2 mixer's in_proj and conv biases
MixerCache = type("MixerCache", (), {})  # a Mamba2 layer's state (templates/mixer.py)
Q_DOWN_BIAS = Q_UP_BIAS = KV_DOWN_BIAS = KV_UP_BIAS = True  # latent attention's projections
# Zamba2's blocks: norms' constructor calls; a stack's classes; a layer's KVCache and MixerCache
ATTN_NORM = MLP_NORM = MIXER_NORM = PER_LAYER_NORM = torch.nn.Identity()
Mamba2 = SharedAttention = SharedMLP = SharedBlock = torch.nn.Module
ParallelCache = type("ParallelCache", (), {})
MTP = torch.nn.Module  # a multi-token prediction module (templates/mtp.py)
MTP_NORM = torch.nn.Identity()  # its norms' constructor call
