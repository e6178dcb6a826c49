"""Images and videos: an ``<img>`` becomes an ``image`` component (its URL, alt text, size and
caption), a ``<video>`` a ``video`` component (its source and caption track); ``image_text_proxy``
is what a text-only model reads for either.

Reads ``<img>``, ``<video>`` and ``<figure>`` elements; writes components.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from lxml import etree

from laminae.tasks.parse.document import Component, Link
from laminae.tasks.parse.html.chrome import BLOCK_TAGS, classes_of, int_attr, should_skip
from laminae.tasks.parse.html.text import TextBuilder


class MediaReader:
    """Figures, images and videos; mixed into ``HtmlParser`` (walker.py), whose state (consumed,
    components, cfg) and walk (inline, block, dispatch, resolve, section_path) it uses."""

    def figure(self, el: etree._Element) -> None:
        caption_el = el.find(".//figcaption")
        imgs = [img for img in el.iter("img") if not should_skip(img)]
        if not imgs:
            self.block(el)
            return
        for img in imgs:
            self.image(img)
        if caption_el is not None:
            self.consumed.add(caption_el)
        for child in el:
            if isinstance(child.tag, str) and child.tag in ("table", "p", "ul", "ol") and child not in self.consumed:
                self.dispatch(child)

    # -- images --------------------------------------------------------------------------------
    def caption_for(self, img: etree._Element) -> tuple[str | None, list[Link]]:
        """The figcaption, thumbnail caption or caption-classed sibling near an image."""
        node = img.getparent()
        for _ in range(5):
            if node is None:
                break
            if node.tag == "figure":
                cap = node.find(".//figcaption")
                if cap is not None:
                    return self._caption(cap)
                break
            if "thumb" in (node.get("class") or "") or "thumbinner" in classes_of(node):
                for cap in node.iter():
                    if isinstance(cap.tag, str) and ({"thumbcaption", "gallerytext"} & classes_of(cap)):
                        return self._caption(cap)
            node = node.getparent()
        sibling = img.getparent().getnext() if img.getparent() is not None else None
        if sibling is not None and "caption" in (sibling.get("class") or "").lower():
            return self._caption(sibling)
        return None, []

    def _caption(self, cap: etree._Element) -> tuple[str | None, list[Link]]:
        tb = TextBuilder()
        self.inline(cap, tb, collect_images=False, with_tail=False)
        self.consumed.add(cap)
        text, links = tb.finish()
        return (text.strip() or None), links

    def image(self, img: etree._Element) -> None:
        if img in self.consumed or should_skip(img):
            return
        self.consumed.add(img)
        if img.get("aria-hidden") == "true" or (img.get("role") or "").lower() == "presentation":
            return
        src = img.get("src") or img.get("data-src") or ""
        url = self.resolve(src)
        if url is None:
            return
        width, height = int_attr(img, "width"), int_attr(img, "height")
        side = self.cfg.min_image_side
        if (width is not None and width < side) or (height is not None and height < side):
            return
        alt = (img.get("alt") or "").strip() or None
        caption, cap_links = self.caption_for(img)
        links = [Link(lk.url, lk.anchor) for lk in cap_links]
        parent = img.getparent()
        while parent is not None and parent.tag != "a" and parent.tag not in BLOCK_TAGS:
            parent = parent.getparent()
        if parent is not None and parent.tag == "a":
            target = self.resolve(parent.get("href"))
            if target and not _looks_like_file_page(target):
                links.append(Link(target, alt or ""))
        self.components.append(
            Component(
                "image", "", self.section_path(), links, caption=caption,
                image_url=url, alt=alt, width=width, height=height,
            )
        )

    def video(self, el: etree._Element) -> None:
        """A ``<video>``: its ``src`` or first ``<source>``, and its captions ``<track>`` (the default
        one first); the fallback text inside it is not the page's."""
        if el in self.consumed:
            return
        self.consumed.add(el)
        sources = [el.get("src"), *(s.get("src") for s in el.iter("source"))]
        url = next((u for u in map(self.resolve, sources) if u), None)
        if url is None:
            return
        tracks = [t for t in el.iter("track")
                  if (t.get("kind") or "subtitles").lower() in ("captions", "subtitles") and t.get("src")]
        tracks.sort(key=lambda t: t.get("default") is None)
        captions = next((u for u in (self.resolve(t.get("src")) for t in tracks) if u), None)
        caption, _ = self.caption_for(el)
        label = (el.get("title") or el.get("aria-label") or "").strip() or None
        self.components.append(Component(
            "video", "", self.section_path(), caption=caption, alt=label, video_url=url, captions_url=captions,
            width=int_attr(el, "width"), height=int_attr(el, "height"),
        ))


def _looks_like_file_page(url: str) -> bool:
    path = urlsplit(url).path
    return "/File:" in path or path.lower().endswith((".jpg", ".jpeg", ".png", ".gif", ".svg", ".webp"))


def image_text_proxy(comp: Component, title: str) -> str:
    """What a text-only model reads for an image (or a video): alt text (its title), caption,
    section and page title."""
    what = "Video" if comp.kind == "video" else "Image"
    parts = [f"{what}: {comp.alt}" if comp.alt else what]
    if comp.caption:
        parts.append(f"Caption: {comp.caption}")
    where = " > ".join([title, *comp.section_path[-1:]]) if title else " > ".join(comp.section_path[-1:])
    if where:
        parts.append(f"In: {where}")
    return ". ".join(part.rstrip(" .") for part in parts) + "."
