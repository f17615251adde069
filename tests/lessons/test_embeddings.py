"""The Embeddings page's lessons: the prompt as table rows, and what the PCA map shows."""

from lifecycle.lessons.embeddings import embedding_sentence, pca_sentence


def test_pca_directions_are_bounded_by_the_number_of_vectors():
    few = pca_sentence(13, 576, 0.447)
    assert "other 10 directions" in few and "44.7%" in few and "most of the spread" in few
    assert "574" not in few
    many = pca_sentence(600, 576, 0.62)
    assert "other 574 directions" in many and "the rest of the spread" in many and "most of" not in many
    three = pca_sentence(3, 576, 1.0)
    assert "exact" in three and "other" not in three


def test_embedding_sentence_counts_the_templates_tokens_only_when_there_are_some():
    templated = embedding_sentence(7, 37, 49_152, 576)
    assert "**7 tokens**" in templated and "chat template's 30 more" in templated and "**37 tokens**" in templated
    assert "49,152 x 576" in templated and "37 vectors of **576 numbers**" in templated
    bare = embedding_sentence(5, 5, 100, 8)
    assert "chat template" not in bare and "reads exactly those" in bare and "5 vectors of **8 numbers**" in bare
