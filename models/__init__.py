"""The physics: congestion-control models and queue disciplines, each a pure function of state
and (delayed) network signals. Nothing here knows about scenario files, the command line or plots.

Modules: `aqm` (drop-tail, RED, ECN step queues), `window` (the TCP window dynamics shared by the
loss- and mark-based controllers), `reno`, `dctcp`; `base` defines the interface a controller
model implements and `registry` maps the scenario's `cc` names to models.
"""
