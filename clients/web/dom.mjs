/* The DOM helpers the view modules share. */

export function $(id) {
  return document.getElementById(id);
}

/** A screen whose main pointer is a finger: no keyboard to press Enter or Esc on, and no
 * focus ring on an untouched button. */
export function touchScreen() {
  return !!window.matchMedia && window.matchMedia("(pointer: coarse)").matches;
}

function append(el, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) child.forEach((c) => append(el, c));
  else el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
}

/** h("button", {class: "x", onclick: fn}, "text", child): text is always textContent, never
 * HTML, since most of it comes from the agent. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([key, value]) => {
    if (value === null || value === undefined || value === false) return;
    if (key.slice(0, 2) === "on" && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "text") {
      el.textContent = value;
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  });
  children.forEach((child) => append(el, child));
  return el;
}
