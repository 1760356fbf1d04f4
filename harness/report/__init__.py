"""``soak-report``: turns a soak artifact and its run directory into PNG curves (training,
evaluation and resources) and one self-contained HTML page, so a person sees at a glance
what happened and why: rundata.py reads, figures.py draws, page.py writes the page."""
