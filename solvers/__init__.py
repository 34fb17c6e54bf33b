"""The numerics: the compiled problem (`problem`), the delay-differential integrator (`dde`), and
batched, segmented runs with progress reporting (`run`). Nothing here imports the command line or
plotting."""
