"""Partition router: splits sorted input into partitions and drives one matcher run each."""
