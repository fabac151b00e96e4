"""What memory means, without storage: the context builder, supersession, consolidation and turn input."""
