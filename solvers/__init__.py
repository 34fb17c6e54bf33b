"""The numerics: the compiled problem (`problem`), the delay-differential integrator (`dde`),
segmented runs with progress reporting, alone or merged (`run`), and the step chosen from the
dynamics (`stepping`). Nothing here imports the command line or plotting."""
