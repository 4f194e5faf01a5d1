"""queue-age-scaler: a KEDA external scaler that sizes job workers from the age of the oldest job.

``__version__`` is the project's one version number: hatch reads it for the wheel and the sdist
(``[tool.hatch.version]``), ``queue-age-scaler --version`` prints it, and scripts/image labels
and tags the image with it.
"""

__version__ = "0.1.0"
