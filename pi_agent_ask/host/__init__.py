"""The agent-host side: session lifecycle, turns, idle wake, ordinary input; the LocalHost."""
