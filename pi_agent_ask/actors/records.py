"""The request and outcome values now live in ``persistence/records.py`` (the journal records
them, so they sit below the actors); re-exported here for the actors that import them."""

from __future__ import annotations

from pi_agent_ask.persistence.records import AskRequest, Outcome, Source, StaleBranch

__all__ = ["AskRequest", "Outcome", "Source", "StaleBranch"]
