"""What a team runs: pack one track of a run into a bundle (``pack``) and submit it (``submit``)."""
