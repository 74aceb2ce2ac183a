"""prompt_toolkit surfaces: the form, the background panel, the settings overlay."""
