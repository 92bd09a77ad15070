"""What a downloaded checkpoint holds, read from its files before the engine starts: whether it
kept the multi-token-prediction (MTP) head that ``vllm_mtp`` drafts with.

Quantizers that drop the MTP head leave a checkpoint that loads and serves, with 0 % of the
drafts accepted. The tensor names tell: in the Qwen3-Next / Qwen3.5 family (Qwen3.6, Qwen3.8)
the head's tensors are named ``mtp.*`` (``mtp.fc.weight``, ``mtp.layers.0.*``), inside a
multimodal wrapper possibly under a prefix (``model.mtp.*``); a name with an ``mtp`` part is
one of them.

The names come from ``model.safetensors.index.json``'s ``weight_map`` when the checkpoint has
one: vLLM then loads only the files that map names (a stray ``mtp.safetensors`` that the index
does not list is not loaded either). Without an index, from the header of every
``*.safetensors`` file (8 bytes of little-endian header length, then that much JSON).

This module runs on the box as well: the ``llmrig_checkpoint`` Ansible module ships it as
module_utils (``ansible/plugins/module_utils/llmrig_checkpoint.py`` is a link to this file),
so it imports the standard library only and reports a problem as a string instead of raising.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, TypedDict

INDEX = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format refuses larger headers


class Summary(TypedDict):
    """What :func:`read_checkpoint` found: the files it read, the tensor counts, a problem ('' = none)."""

    read: list[str]
    tensors: int
    mtp_tensors: int
    problem: str


def is_mtp(name: str) -> bool:
    """A tensor of the MTP head: a dot-separated part of its name is ``mtp``."""
    return "mtp" in name.split(".")


def index_names(text: str, where: str) -> tuple[list[str], str]:
    """Tensor names of an index file's ``weight_map``, or a problem naming ``where``."""
    try:
        document: Any = json.loads(text)
    except ValueError as exc:
        return [], f"{where} is not JSON: {exc}"
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict):
        return [], f"{where} has no weight_map"
    return [str(name) for name in weight_map], ""


def header_names(header: bytes, where: str) -> tuple[list[str], str]:
    """Tensor names of a safetensors header (its JSON without ``__metadata__``), or a problem."""
    try:
        document: Any = json.loads(header.decode("utf-8"))
    except ValueError as exc:
        return [], f"{where} has no safetensors header: {exc}"
    if not isinstance(document, dict):
        return [], f"{where} has no safetensors header: not a JSON object"
    return [str(name) for name in document if name != "__metadata__"], ""


def read_header(path: str) -> tuple[bytes, str]:
    """The JSON header of one safetensors file, read without the tensors, or a problem."""
    try:
        with open(path, "rb") as stream:
            prefix = stream.read(8)
            if len(prefix) < 8:
                return b"", f"{path} is shorter than a safetensors header"
            (length,) = struct.unpack("<Q", prefix)
            if length > MAX_HEADER_BYTES:
                return b"", f"{path} declares a {length}-byte header, more than safetensors allows"
            header = stream.read(length)
    except OSError as exc:
        return b"", f"cannot read {path}: {exc.strerror or exc}"
    if len(header) < length:
        return b"", f"{path} ends inside its safetensors header"
    return header, ""


def read_checkpoint(model_dir: str) -> Summary:
    """Read the tensor names of the checkpoint in ``model_dir`` and count the MTP head's."""
    index = os.path.join(model_dir, INDEX)
    names: list[str] = []
    if os.path.isfile(index):
        read = [index]
        try:
            with open(index, encoding="utf-8") as stream:
                names, problem = index_names(stream.read(), index)
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"cannot read {index}: {exc}"
    else:
        try:
            files = sorted(entry for entry in os.listdir(model_dir) if entry.endswith(".safetensors"))
        except OSError as exc:
            files, problem = [], f"cannot list {model_dir}: {exc.strerror or exc}"
        else:
            problem = "" if files else f"{model_dir} has neither {INDEX} nor a .safetensors file"
        read = [os.path.join(model_dir, entry) for entry in files]
        for path in read:
            header, problem = read_header(path)
            found, problem = header_names(header, path) if not problem else ([], problem)
            names += found
            if problem:
                break
    mtp = sum(1 for name in names if is_mtp(name))
    return {"read": read, "tensors": len(names), "mtp_tensors": mtp, "problem": problem}


def mtp_refusal(summary: Summary) -> str:
    """The one line that refuses ``vllm_mtp: true`` for this checkpoint ('' when its MTP head is there)."""
    where = ", ".join(summary["read"]) or "the model directory"
    if summary["problem"]:
        return f"vllm_mtp: cannot tell whether the checkpoint has an MTP head: {summary['problem']}"
    if summary["mtp_tensors"]:
        return ""
    return (
        f"vllm_mtp: {where} lists {summary['tensors']:,} tensors and none of an MTP head (no name with an "
        "'mtp' part): this checkpoint dropped it, so every draft would be rejected; set vllm_mtp: false"
    )
