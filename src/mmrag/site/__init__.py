"""The published site: the last run's rendered notebooks as a static, offline site (``make site``).

``python -m mmrag.site [--results results] [--out docs]`` builds an index that reads like the
repository's paper (the three systems, the claims, the cross-system comparison, the cost of each
system per question), one page per stage in pipeline order (nbconvert's HTML exporter with a small
template; figures stored once each under ``figures/<content hash>``) and a trace explorer (each
system's answer to one question, side by side, gold evidence marked), from a results folder and
the data folder beside it.
"""
