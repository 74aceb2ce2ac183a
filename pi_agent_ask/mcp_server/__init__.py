"""pi-agent-ask over the Model Context Protocol: the tools layer (``tools.py``), the stdio
server (``stdio.py``) and the Claude Code hook (``hook.py``)."""
