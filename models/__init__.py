"""The physics: congestion-control models and queue disciplines, each a pure function of state
and (delayed) network signals. Nothing here knows about scenario files, the command line or plots.

Modules: `aqm` (the queue disciplines: drop-tail, RED, ECN step), `window` (the TCP window
dynamics shared by the loss- and mark-based controllers), `reno`, `dctcp`; `base` defines the
interface a controller model implements, `parameters` how a model declares its parameters, and
`registry` names every congestion control once for every engine.
"""
