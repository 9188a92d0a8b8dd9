import { mount } from 'svelte';
import App from './App.svelte';
import './app.css';

const saved = (() => {
  try {
    return localStorage.getItem('countersign.theme');
  } catch {
    return null;
  }
})();
if (saved === 'light' || saved === 'dark') document.documentElement.setAttribute('data-theme', saved);

const target = document.getElementById('app');
if (target) mount(App, { target });
