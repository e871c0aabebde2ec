"""Replace a KRaft controller lost for good, or remove voters, on a dynamic quorum (KIP-853)."""
