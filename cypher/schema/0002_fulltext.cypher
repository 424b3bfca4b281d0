// name: memory_text_index
// params:
// Full-text index used by generic recall across the memory layers.
CREATE FULLTEXT INDEX symfonic_memory_text IF NOT EXISTS
FOR (n:Skill|Trigger|Fact) ON EACH [n.label, n.context, n.condition, n.task, n.text];
