"""Whether a downloaded checkpoint kept its MTP head (bench/rig/checkpoint.py), read from small
checkpoint files written here: an index's weight_map, or the safetensors headers when there is
no index; and the llmrig_checkpoint Ansible module that runs the same code on the box."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.rig.checkpoint import INDEX, is_mtp, mtp_refusal, read_checkpoint
from tests.helpers import BIN, REPO, load_file_module

# Names as Qwen3.5-style checkpoints spell them: a text model, and a multimodal wrapper.
BODY = ["model.layers.0.linear_attn.in_proj_qkvz.weight_packed", "model.layers.3.self_attn.q_proj.weight_scale"]
MTP = ["mtp.fc.weight", "mtp.layers.0.mlp.gate_proj.weight", "mtp.norm.weight"]


def _safetensors(path: Path, names: list[str]) -> None:
    """A real safetensors file: 8-byte little-endian header length, the JSON header, the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    for number, name in enumerate(names):
        header[name] = {"dtype": "BF16", "shape": [1], "data_offsets": [2 * number, 2 * number + 2]}
    text = json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0\0" * len(names))


def _index(folder: Path, names: list[str]) -> Path:
    path = folder / INDEX
    weight_map = dict.fromkeys(names, "model-00001-of-00002.safetensors")
    path.write_text(json.dumps({"metadata": {"total_size": 2}, "weight_map": weight_map}), encoding="utf-8")
    return path


def test_an_index_with_mtp_tensors_is_read_and_nothing_is_refused(tmp_path: Path) -> None:
    index = _index(tmp_path, BODY + MTP)
    summary = read_checkpoint(str(tmp_path))
    assert summary == {"read": [str(index)], "tensors": 5, "mtp_tensors": 3, "problem": ""}
    assert mtp_refusal(summary) == ""


def test_an_index_without_mtp_tensors_is_refused_naming_the_index(tmp_path: Path) -> None:
    index = _index(tmp_path, BODY)
    # A stray file of MTP tensors that the index does not map: vLLM does not load it either.
    _safetensors(tmp_path / "mtp.safetensors", MTP)
    summary = read_checkpoint(str(tmp_path))
    assert (summary["read"], summary["mtp_tensors"]) == ([str(index)], 0)
    assert mtp_refusal(summary) == (
        f"vllm_mtp: {index} lists 2 tensors and none of an MTP head (no name with an 'mtp' part): this "
        "checkpoint dropped it, so every draft would be rejected; set vllm_mtp: false"
    )


def test_without_an_index_every_safetensors_header_is_read(tmp_path: Path) -> None:
    _safetensors(tmp_path / "model.safetensors", BODY)
    _safetensors(tmp_path / "mtp.safetensors", ["model.mtp.fc.weight"])
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    summary = read_checkpoint(str(tmp_path))
    assert summary == {
        "read": [str(tmp_path / "model.safetensors"), str(tmp_path / "mtp.safetensors")],
        "tensors": 3,
        "mtp_tensors": 1,
        "problem": "",
    }
    (tmp_path / "mtp.safetensors").unlink()
    refused = mtp_refusal(read_checkpoint(str(tmp_path)))
    assert refused.startswith(f"vllm_mtp: {tmp_path / 'model.safetensors'} lists 2 tensors and none of an MTP head")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mtp.fc.weight", True),
        ("model.mtp.layers.0.self_attn.q_proj.weight", True),
        ("model.language_model.mtp.norm.weight", True),
        ("model.layers.0.mtp_gate.weight", False),
        ("model.smtp.weight", False),
        ("lm_head.weight", False),
    ],
)
def test_an_mtp_tensor_has_an_mtp_part_in_its_name(name: str, expected: bool) -> None:
    assert is_mtp(name) is expected


def _problem(tmp_path: Path) -> str:
    summary = read_checkpoint(str(tmp_path))
    assert (summary["tensors"], summary["mtp_tensors"]) == (0, 0)
    refusal = mtp_refusal(summary)
    assert refusal == f"vllm_mtp: cannot tell whether the checkpoint has an MTP head: {summary['problem']}"
    return summary["problem"]


def test_what_cannot_be_read_is_a_problem_naming_the_file(tmp_path: Path) -> None:
    assert _problem(tmp_path) == f"{tmp_path} has neither {INDEX} nor a .safetensors file"
    (tmp_path / "model.safetensors").write_bytes(b"\x01\x00")
    assert _problem(tmp_path) == f"{tmp_path / 'model.safetensors'} is shorter than a safetensors header"
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 1000) + b"{}")
    assert _problem(tmp_path) == f"{tmp_path / 'model.safetensors'} ends inside its safetensors header"
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 2**40))
    assert "header, more than safetensors allows" in _problem(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 4) + b"[1] ")
    assert _problem(tmp_path) == f"{tmp_path / 'model.safetensors'} has no safetensors header: not a JSON object"
    (tmp_path / INDEX).write_text("{not json", encoding="utf-8")
    assert _problem(tmp_path).startswith(f"{tmp_path / INDEX} is not JSON: ")
    (tmp_path / INDEX).write_text('{"metadata": {}}', encoding="utf-8")
    assert _problem(tmp_path) == f"{tmp_path / INDEX} has no weight_map"
    assert _problem(tmp_path / "missing") == f"cannot list {tmp_path / 'missing'}: No such file or directory"


def test_the_ansible_module_reads_on_the_host_with_the_same_code(tmp_path: Path) -> None:
    """Real Ansible runs the llmrig_checkpoint module (module_utils: a link to bench/rig/checkpoint.py)
    against this machine, and the filter turns its result into the refusal."""
    link = REPO / "ansible" / "plugins" / "module_utils" / "llmrig_checkpoint.py"
    assert link.resolve() == REPO / "bench" / "rig" / "checkpoint.py"
    index = _index(tmp_path, BODY)
    done = subprocess.run(
        [str(BIN / "ansible"), "localhost", "-m", "llmrig_checkpoint", "-a", f"path={tmp_path}", "-o"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.split("=>", 1)[1])
    assert (result["read"], result["tensors"], result["mtp_tensors"], result["changed"]) == ([str(index)], 2, 0, False)
    filters = load_file_module(REPO / "ansible" / "plugins" / "filter" / "llmrig.py", "llmrig_filters")
    refusal = filters.FilterModule().filters()["llmrig_mtp_refusal"](result)
    assert refusal.startswith(f"vllm_mtp: {index} lists 2 tensors and none of an MTP head")
