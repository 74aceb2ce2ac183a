"""Ready-made tools for agent frameworks, each behind an optional extra.

- ``pi_agent_ask.integrations.pydantic_ai`` (``pip install 'pi-agent-ask[pydantic-ai]'``): a
  toolset and a history processor for pydantic-ai agents;
- ``pi_agent_ask.integrations.openai_agents`` (``pip install 'pi-agent-ask[openai-agents]'``):
  function tools and a model-input filter for the OpenAI Agents SDK.

Both run on an asyncio runtime (``pi_agent_ask.aio.open_runtime``); ``docs/frameworks.md``
shows them end to end. Importing a module without its framework installed raises an
``ImportError`` naming the extra to install.
"""
