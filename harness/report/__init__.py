"""``soak-report``: turns a soak artifact into PNG resource curves and one self-contained
HTML page, so a person sees at a glance what happened and why."""
