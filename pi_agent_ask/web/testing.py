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
    "browser_missing",
    "by_role",
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


def roles(scope: Any, role: str) -> list[Any]:
    """The displayed elements in ``scope`` whose computed role is ``role``."""
    from selenium.webdriver.common.by import By

    found = scope.find_elements(By.CSS_SELECTOR, _CANDIDATES.get(role, f"[role={role}]"))
    return [e for e in found if e.aria_role == role]


def by_role(scope: Any, role: str, name: str, *, exact: bool = True) -> Any:
    """The one element in ``scope`` with this role and accessible name."""
    matches = [
        e
        for e in roles(scope, role)
        if (e.accessible_name == name if exact else name in e.accessible_name)
    ]
    names = [e.accessible_name for e in roles(scope, role)]
    assert len(matches) == 1, f"{len(matches)} {role} named {name!r}; there are {names}"
    return matches[0]
