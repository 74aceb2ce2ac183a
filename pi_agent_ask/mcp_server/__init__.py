"""pi-agent-ask over the Model Context Protocol: the tools layer (``tools.py``), the stdio
server (``stdio.py``), form elicitation (``elicitation.py``) and the Claude Code hook
(``hook.py``). Importing this package stays cheap: the SDK loads with the submodules."""

PROGRESS_INTERVAL = 10.0
"""Seconds between progress notifications while a call waits for the person."""
