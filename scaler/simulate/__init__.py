"""The fleet simulator: scenarios, policies side by side, the scoreboard (docs/simulator.md)."""
