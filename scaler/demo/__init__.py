"""The demo (``scripts/demo``): a private Redis, the real server, a producer playing a short
scenario, worker processes, and KEDA and the HPA emulated over gRPC scaling them, with a live
view, a figure of the run and a one-line summary."""
