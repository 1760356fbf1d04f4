"""Soak campaigns: a matrix of ``g1-soak`` runs scheduled on Ray (docs/campaign.md).

``spec`` reads the campaign file, ``cell`` runs one attempt of one cell (inside a Ray task),
``child`` is the cell's ``g1-soak`` process, ``mps_fleet`` the campaign's cumps daemons,
``state`` the ``campaign.json`` document, ``table`` its table and HTML page, ``runner`` the
Ray driver and ``cli`` the ``soak-campaign`` command. ``candidate`` checks the regression
check's ``--override`` list; ``compare`` and ``compare_view`` set a candidate's check beside
the baseline's. Only ``runner`` imports Ray, and only
``soak-campaign run`` imports ``runner``: the single-soak path never needs the extra.
"""
