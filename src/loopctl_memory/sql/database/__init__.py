"""How a store reaches its database: the engine, the unit of work, errors translated once."""
