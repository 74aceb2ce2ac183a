"""Driving the web desk in a real browser, for tests and benchmarks (Selenium, Chromium).

Debian's ``chromium`` and ``chromium-driver`` are used as installed (``/usr/bin``), so
Selenium never downloads a browser. Elements are found the way a person and a screen reader
find them: by role and accessible name, as Chromium computes them (``aria_role``,
``accessible_name``), never by the page's classes or ids.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "area_brightness",
    "brightness",
    "browser_missing",
    "by_role",
    "emulate_scheme",
    "roles",
    "set_viewport",
    "start_browser",
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
_CANDIDATES = {
    "button": "button, summary, input[type=submit], input[type=button], a.button",
    "radio": "input[type=radio]",
    "checkbox": "input[type=checkbox]",
    "textbox": "textarea, input[type=text], input:not([type])",
    "searchbox": "input[type=search]",
    "link": "a[href]",
    "group": "fieldset, [role=group]",
    "heading": "h1, h2, h3",
    "alert": "[role=alert]",
    "status": "[role=status]",
    "combobox": "select",
}


def browser_missing() -> str | None:
    """Why no browser test can run here, or ``None``."""
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        return f"Chromium is not installed ({CHROMIUM}; Debian package chromium)"
    if not CHROMEDRIVER.exists():
        return f"chromedriver is not installed ({CHROMEDRIVER}; Debian package chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    return None


def start_browser(width: int = 1280, height: int = 900) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)


def set_viewport(driver: Any, width: int, height: int, *, mobile: bool) -> None:
    """The page's viewport exactly (a phone: touch, device scale 3)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {
            "width": width,
            "height": height,
            "deviceScaleFactor": 3 if mobile else 1,
            "mobile": mobile,
        },
    )
    driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": mobile})


def _named(scope: Any, role: str) -> list[tuple[Any, str]]:
    """The elements in ``scope`` whose computed role is ``role``, with their accessible names.

    An element the page replaced while it was being read (the live updates swap parts of the
    page) is no longer there, and is left out."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    found = []
    for element in scope.find_elements(By.CSS_SELECTOR, _CANDIDATES.get(role, f"[role={role}]")):
        try:
            if element.aria_role == role:
                found.append((element, element.accessible_name))
        except StaleElementReferenceException:
            continue
    return found


def roles(scope: Any, role: str) -> list[Any]:
    """The elements in ``scope`` whose computed role is ``role``."""
    return [element for element, _name in _named(scope, role)]


def by_role(scope: Any, role: str, name: str, *, exact: bool = True) -> Any:
    """The one element in ``scope`` with this role and accessible name."""
    named = _named(scope, role)
    matches = [e for e, found in named if (found == name if exact else name in found)]
    names = [found for _e, found in named]
    assert len(matches) == 1, f"{len(matches)} {role} named {name!r}; there are {names}"
    return matches[0]


def emulate_scheme(driver: Any, scheme: str) -> None:
    """The page sees ``prefers-color-scheme: scheme`` (``light`` or ``dark``), as a browser
    set to that scheme does; ``""`` gives the system's back."""
    features = [{"name": "prefers-color-scheme", "value": scheme}] if scheme else []
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})


def brightness(driver: Any, element: Any) -> float:
    """The mean relative brightness (0 black to 1 white) of the pixels Chromium draws for
    ``element``, from a screenshot of its box (PNG, decoded here: no imaging library)."""
    box = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {x: r.left + window.scrollX, y: r.top + window.scrollY,"
        " width: r.width, height: r.height, scale: 1};",
        element,
    )
    return area_brightness(driver, box)


def area_brightness(driver: Any, box: dict[str, float]) -> float:
    """The mean relative brightness (0 black to 1 white) of the pixels Chromium draws in
    ``box`` (page coordinates: ``x``, ``y``, ``width``, ``height``, ``scale``)."""
    import base64

    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "clip": box, "captureBeyondViewport": True},
    )
    width, channels, rows = _png_rows(base64.b64decode(shot["data"]))
    total = 0
    for row in rows:
        for x in range(width):
            pixel = row[x * channels : x * channels + 3]
            total += sum(pixel)
    return total / (3 * 255 * width * len(rows))


def _png_rows(data: bytes) -> tuple[int, int, list[bytes]]:
    """An 8-bit RGB or RGBA PNG's width, bytes per pixel and unfiltered rows (what Chromium's
    screenshots are)."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, width, height, channels = 8, b"", 0, 0, 0
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6) and body[12] == 0, "unexpected PNG format"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        method = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if method == 1:
                line[i] = (line[i] + left) & 0xFF
            elif method == 2:
                line[i] = (line[i] + up) & 0xFF
            elif method == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif method == 4:
                guess = left + up - corner
                near = min((abs(guess - left), 0), (abs(guess - up), 1), (abs(guess - corner), 2))
                line[i] = (line[i] + (left, up, corner)[near[1]]) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, channels, rows
