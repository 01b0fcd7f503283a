"""A PEFT LoRA adapter written as llama.cpp's GGUF LoRA file, so that the llama.cpp backend applies it
to the served GGUF base (one base in memory, the adapter chosen per request).

The layout follows llama.cpp's own converter (`convert_lora_to_gguf.py`): for each adapted linear layer
of the base, named as llama.cpp names the base's tensor (`blk.N.attn_q.weight`, ...), two tensors
`<name>.lora_a` (PEFT's `lora_A`, shape [rank, in]) and `<name>.lora_b` (PEFT's `lora_B`, [out, rank]);
the metadata `general.type=adapter`, `general.architecture`, `adapter.type=lora` and
`adapter.lora.alpha` (llama.cpp scales the update by alpha / rank, as PEFT does). Qwen2 stores Q and K
unpermuted, so no row permutation is applied (llama's converter permutes them: not exported here).

Written when a refresh trains the adapter, and, for an adapter without it, when the adapter is
published (`ensure_gguf_lora`): the llama.cpp backend never serves a PEFT adapter through
transformers. Needs `gguf` and numpy only (no torch, transformers or peft).
"""

from __future__ import annotations

import json
from pathlib import Path

from assistant.core.errors import ConfigError, InvalidRequestError

GGUF_ADAPTER_FILE = "adapter.gguf"
# transformers' model_type -> the architecture in the base GGUF (`general.architecture`). Not llama: its
# converter permutes the rows of Q and K, which the LoRA B matrices of q_proj/k_proj would have to follow.
ARCHITECTURES = {"qwen2": "qwen2"}


def gguf_tensor_name(peft_key: str, name_map: object) -> str:
    """llama.cpp's name of the base tensor a PEFT LoRA tensor adapts, with its `.lora_a`/`.lora_b` suffix.

    Args:
        peft_key: e.g. `base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight`.
        name_map: a `gguf.TensorNameMap` of the base's architecture and block count.

    Returns:
        e.g. `blk.3.attn_q.weight.lora_a`.

    Raises:
        InvalidRequestError: the key is no LoRA A/B weight, or llama.cpp has no tensor for its layer.
    """
    for marker, suffix in ((".lora_A.weight", ".lora_a"), (".lora_B.weight", ".lora_b")):
        if peft_key.endswith(marker):
            module = peft_key[: -len(marker)].removeprefix("base_model.model.")
            base = name_map.get_name(module + ".weight", try_suffixes=(".weight",))  # type: ignore[attr-defined]
            if base is None:
                raise InvalidRequestError(f"LoRA tensor {peft_key!r} adapts {module!r}, which llama.cpp's model has no tensor for")
            return base + suffix
    raise InvalidRequestError(f"{peft_key!r} is no LoRA A or B weight")


def export_gguf_lora(adapter_dir: Path, *, model_type: str, block_count: int, out: Path | None = None) -> Path:
    """Write the PEFT adapter in `adapter_dir` as a llama.cpp GGUF LoRA file (float32 tensors).

    Args:
        adapter_dir: a saved PEFT LoRA (`adapter_config.json`, `adapter_model.safetensors`).
        model_type: the base's transformers `model_type` (`qwen2`).
        block_count: the base's transformer layers (`num_hidden_layers`).
        out: the file to write; default `adapter_dir/adapter.gguf`.

    Returns:
        The GGUF file's path.

    Raises:
        InvalidRequestError: an architecture llama.cpp's LoRA export is not wired for here, or a tensor
            with no llama.cpp counterpart.
    """
    import gguf  # noqa: PLC0415 - only when an adapter is exported
    from safetensors.numpy import load_file  # noqa: PLC0415

    arch = ARCHITECTURES.get(model_type)
    if arch is None:
        raise InvalidRequestError(f"cannot export a LoRA of a {model_type!r} base to GGUF; known: {sorted(ARCHITECTURES)}")
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    name_map = gguf.TensorNameMap(gguf.MODEL_ARCH[arch.upper()], block_count)
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    out = out or adapter_dir / GGUF_ADAPTER_FILE
    temporary = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(str(temporary), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
    for key in sorted(tensors):
        writer.add_tensor(gguf_tensor_name(key, name_map), tensors[key].astype("float32"))
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    temporary.replace(out)
    return out


def ensure_gguf_lora(folder: str | Path, base_model: str) -> Path:
    """The adapter's llama.cpp GGUF LoRA (`folder/adapter.gguf`), exported from its PEFT files first when
    missing; the architecture and layer count are read from the base GGUF the adapter was trained on
    (`general.architecture`, `<arch>.block_count`).

    Args:
        folder: the adapter's folder (`AdapterRecord.path`).
        base_model: what the adapter was trained on (`AdapterRecord.base_model`): a GGUF file.

    Returns:
        The GGUF LoRA's path.

    Raises:
        ConfigError: there is none and it cannot be written (no PEFT files, a base that is no GGUF file
            here, an architecture the export is not wired for): the message names the fix.
    """
    folder = Path(folder)
    out = folder / GGUF_ADAPTER_FILE
    if out.is_file():
        return out
    fix = ("retire it (`assistant finetune rollback`) and run a refresh on the served model "
           "(`assistant finetune run`, ASSISTANT_FINETUNE_BASE_MODEL=served)")
    base = Path(base_model)
    if not (folder / "adapter_model.safetensors").is_file() or base.suffix != ".gguf" or not base.is_file():
        raise ConfigError(f"adapter {folder.name} has no {GGUF_ADAPTER_FILE} and cannot be exported to one (its base "
                          f"{base_model!r} is no GGUF file here, or its PEFT files are missing), so llama.cpp cannot "
                          f"serve it: {fix}")
    import gguf  # noqa: PLC0415 - only when an adapter is exported

    reader = gguf.GGUFReader(str(base))
    arch = str(reader.fields["general.architecture"].contents())
    model_type = next((t for t, a in ARCHITECTURES.items() if a == arch), None)
    if model_type is None:
        raise ConfigError(f"adapter {folder.name} was trained on a {arch!r} GGUF, whose LoRA is not exported for "
                          f"llama.cpp here (known: {sorted(ARCHITECTURES.values())}): {fix}")
    blocks = int(reader.fields[f"{arch}.block_count"].contents())
    try:
        return export_gguf_lora(folder, model_type=model_type, block_count=blocks)
    except InvalidRequestError as exc:
        raise ConfigError(f"adapter {folder.name} cannot be exported for llama.cpp: {exc.message}; {fix}") from exc
