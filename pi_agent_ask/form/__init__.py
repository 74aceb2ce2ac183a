"""The pure core of the ask contract: types, schemas, validation, the form state machine and
result building. No I/O (except reading context files during validation) and no Trio."""
