"""The Trio runtime: one module per actor, and the runtime that wires them."""
