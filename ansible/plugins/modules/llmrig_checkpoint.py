#!/usr/bin/python
"""Ansible module: read a downloaded checkpoint's tensor names on the host and count its MTP head's."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llmrig_checkpoint
short_description: Tell whether a downloaded checkpoint kept its MTP head, changing nothing
description:
  - Reads the tensor names of the checkpoint in O(path) from C(model.safetensors.index.json)'s
    C(weight_map) when there is one (vLLM loads only the files it maps), else from the header of
    every C(*.safetensors) file, and counts the names with an C(mtp) part (the multi-token
    prediction head of Qwen3-Next / Qwen3.5-style models).
  - The reading is bench/rig/checkpoint.py, shipped as module_utils; a file that cannot be read
    is reported in RV(problem), not raised.
options:
  path:
    description: Directory of the downloaded checkpoint.
    type: path
    required: true
author: llmrig
"""

EXAMPLES = r"""
- name: Read the checkpoint's tensor names
  llmrig_checkpoint:
    path: /srv/llmrig/models/qwen3.8-27b-w4a16
  register: checkpoint
"""

RETURN = r"""
read:
  description: The files whose names were read (the index, or every safetensors file).
  returned: always
  type: list
  elements: str
tensors:
  description: Tensor names found.
  returned: always
  type: int
mtp_tensors:
  description: Tensor names with an C(mtp) part.
  returned: always
  type: int
problem:
  description: Why the names could not be read ('' when they could).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.llmrig_checkpoint import read_checkpoint


def main() -> None:
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)
    module.exit_json(changed=False, **read_checkpoint(module.params["path"]))


if __name__ == "__main__":
    main()
