"""pi-agent-ask over the Model Context Protocol: the stdio server (``stdio.py``), its
forwarding to a desk (``forward.py``), form elicitation (``elicitation.py``) and the Claude
Code hook (``hook.py``). The tools themselves are ``pi_agent_ask.mcp_common.tools``. Importing
this package stays cheap: the SDK loads with the submodules."""
