"""The generated multimodal enterprise wiki: names, domains, templates, phrasing, pictures,
question families and the oracle that answers them from the world's own facts."""
