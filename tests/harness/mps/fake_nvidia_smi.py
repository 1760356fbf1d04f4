"""A fake ``nvidia-smi`` answering only ``--query-gpu=index,uuid,name --format=csv,noheader``.

The GPUs come from ``FAKE_GPUS`` (``index,uuid,name;...``); ``FAKE_SMI_FAIL`` makes it fail.
"""

import os
import sys

if os.environ.get("FAKE_SMI_FAIL"):
    print(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        file=sys.stderr,
    )
    sys.exit(9)
if sys.argv[1:] != ["--query-gpu=index,uuid,name", "--format=csv,noheader"]:
    print(f"fake nvidia-smi: unsupported arguments {sys.argv[1:]}", file=sys.stderr)
    sys.exit(2)
for row in filter(None, os.environ.get("FAKE_GPUS", "").split(";")):
    index, uuid, name = row.split(",", 2)
    print(f"{index}, {uuid}, {name}")
