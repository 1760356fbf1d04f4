"""Motion importer: clips from other tools' conventions, mapped by name onto our G1 contract.

``conventions`` reads and detects a source file, ``convert`` resamples it and recomputes the
body states on our model, ``checks`` reports plausibility numbers, ``resolve`` hooks foreign
files and clip sets into motion resolution, ``cli`` is the ``g1-motion`` command.
docs/assets.md ("Importing clips") describes the conventions, the conversion and its
tolerances.
"""
