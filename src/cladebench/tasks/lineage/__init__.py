"""Steered lineage completion: complete an organism's lineage below a given rank."""
