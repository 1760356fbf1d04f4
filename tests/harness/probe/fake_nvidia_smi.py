"""A fake ``nvidia-smi`` for the probe's GPU snapshot (run through a PATH wrapper).

``FAKE_SMI_GPUS`` = ``index,uuid,name,driver;...`` (empty: no GPU rows); ``FAKE_SMI_APPS`` =
``pid,process_name,used_mib,gpu_uuid;...``; ``FAKE_SMI_FAIL`` makes every query exit 9.
"""

import os
import sys

if os.environ.get("FAKE_SMI_FAIL"):
    print(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        file=sys.stderr,
    )
    sys.exit(9)
args = sys.argv[1:]
if len(args) != 2 or args[1] != "--format=csv,noheader,nounits":
    print(f"fake nvidia-smi: unsupported arguments {args}", file=sys.stderr)
    sys.exit(2)
rows = lambda name: [r for r in os.environ.get(name, "").split(";") if r]
if args[0].startswith("--query-gpu="):
    for row in rows("FAKE_SMI_GPUS"):
        index, uuid, name, driver = row.split(",")
        print(
            f"{index}, {uuid}, {name}, {driver}, 1980, 1980, 3201, 1980, 3201, [N/A], 700.00, 143771, 1"
        )
elif args[0].startswith("--query-compute-apps="):
    for row in rows("FAKE_SMI_APPS"):
        print(", ".join(row.split(",")))
else:
    print(f"fake nvidia-smi: unsupported query {args[0]}", file=sys.stderr)
    sys.exit(2)
