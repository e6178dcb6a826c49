"""Crawl: read the seeds, fetch pages (HTTP, robots.txt, redirects, retries) and the pictures they show."""
