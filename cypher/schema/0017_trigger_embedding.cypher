// name: trigger_embedding_index
// params:
// Semantic reminders: a turn that carries the embedding of what was said asks
// this index for the nearest trigger embeddings (cosine), then keeps only its
// own scope's pending ones at or above the similarity floor. No dimension is
// fixed, so tenants may use different embedding models: a search only meets
// vectors of its own length. Quantization is off so that the index's scores
// are the exact cosine the floor is compared with.
CREATE VECTOR INDEX trigger_embedding IF NOT EXISTS FOR (t:Trigger) ON (t.embedding)
OPTIONS {indexConfig: {`vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false}};
