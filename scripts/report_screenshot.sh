#!/usr/bin/env bash
# A PNG of a soak report as a browser shows it (docs/soak.md "What the report looks like"):
#
#   uv run bash scripts/report_screenshot.sh REPORT_HTML OUT_PNG
#
# Headless Chromium (Debian: apt-get install -y --no-install-recommends chromium) renders the
# whole page 1280 px wide; pillow then cuts the blank canvas below it and stores the picture
# with 128 colours (a report of the README quick start: ~270 kB). Env: PYTHON (default python).
# Exit 0 written, 1 the browser or the conversion failed, 2 bad arguments.
set -euo pipefail
usage="usage: report_screenshot.sh REPORT_HTML OUT_PNG"
html=${1:?$usage}
out=${2:?$usage}
if [ ! -f "$html" ]; then
  echo "error: $html does not exist; render it first: soak-report ARTIFACT --out DIR" >&2
  exit 2
fi
case "$out" in *.png) ;; *) echo "error: OUT_PNG=$out must end in .png" >&2; exit 2 ;; esac
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "error: chromium not found; install it: apt-get install -y --no-install-recommends chromium" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
height=12000  # taller than any report; the blank rest is cut below
args=(--headless --disable-gpu --hide-scrollbars "--window-size=1280,$height"
      "--screenshot=$tmp/page.png")
# Chromium will not start its sandbox as root (containers, CI); there it runs without.
if [ "$(id -u)" -eq 0 ]; then args+=(--no-sandbox); fi
if ! "$browser" "${args[@]}" "file://$(realpath "$html")" >"$tmp/browser.log" 2>&1; then
  tail -5 "$tmp/browser.log" >&2
  echo "error: $browser could not render $html" >&2
  exit 1
fi
"${PYTHON:-python}" - "$tmp/page.png" "$out" "$height" <<'PY'
import os
import sys

from PIL import Image, ImageChops

page, out, height = sys.argv[1], sys.argv[2], int(sys.argv[3])
image = Image.open(page).convert("RGB")
box = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
if box is None:
    sys.exit(f"error: {page} is blank; open the report in a browser to see why")
if box[3] >= height - 1:
    sys.exit(f"error: the report is taller than {height} px; raise height in this script")
picture = image.crop((0, 0, image.width, box[3] + box[1])).quantize(
    colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
)
tmp_out = f"{out}.tmp"
picture.save(tmp_out, format="PNG", optimize=True)
os.replace(tmp_out, out)
print(f"{out}: {picture.width}x{picture.height}, {os.path.getsize(out)} bytes")
PY
