"""Session file (CBOR frames with branches), the ask journal and history, and the settings store."""
