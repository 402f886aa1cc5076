"""MM-R2: KnowledgeMap, intent-referent binding, the routing agent, trajectory synthesis."""
