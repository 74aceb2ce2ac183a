# pi-agent-ask tasks. `just --list` shows them.

python := env_var_or_default("PYTHON", ".venv/bin/python")

# Run the scripted demo host in this terminal.
demo *ARGS:
    {{python}} -m pi_agent_ask demo {{ARGS}}

# The whole test suite (unit, property, runtime, UI, end-to-end in tmux).
test *ARGS:
    {{python}} -m pytest -n 2 {{ARGS}}

# ruff lint and format check; mypy (strict) over the whole package.
lint:
    {{python}} -m ruff check .
    {{python}} -m ruff format --check .
    {{python}} -m mypy

# Benchmarks; print medians, assert nothing.
bench *ARGS:
    {{python}} -m benchmarks {{ARGS}}

# Mutation testing (mutmut) of actors/ and persistence/ against the fast suites; slow. Pass
# mutant names to narrow it: just mutate 'pi_agent_ask.actors.queue*'. Then: mutmut results.
mutate *ARGS:
    {{python}} -m mutmut run {{ARGS}}

# Model-check the queue's delivery protocol (models/queue.pml) and the team desk's
# (models/team.pml) with spin; prints state counts. MODELS=team just model: one of them.
model *ARGS:
    ./scripts/model {{ARGS}}
