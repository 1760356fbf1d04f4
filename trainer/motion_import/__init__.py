"""Motion importer: clips from other tools' conventions, mapped by name onto our G1 contract.

``conventions`` detects a source file's convention and reads it (``source`` holds the typed
result, ``validate`` the field checks, ``csv_clip`` the CSV reader, ``model`` the G1 model and
its tree orders), ``convert`` resamples it and recomputes the body states on our model,
``checks`` reports plausibility numbers, ``resolve`` hooks foreign files and clip sets into
motion resolution, ``report``/``plot``/``cli`` are the ``g1-motion`` command.
docs/assets.md ("Importing clips") describes the conventions, the conversion and its
tolerances.
"""
