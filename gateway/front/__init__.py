"""What every source (store or federation) shares on the way out: prompt rendering."""
